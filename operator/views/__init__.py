"""What shoal shows people: ``shoal explain``'s document and the fleet page (live and offline)."""
