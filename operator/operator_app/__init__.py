"""The operator: kopf handlers, the scheduling loop's lifecycle, metrics and health servers."""
