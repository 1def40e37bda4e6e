# `helm test`'s check (run with `python -c` in the shoal image): GET $SHOAL_HEALTHZ (host:port/path)
# over HTTPS, whose certificate may be self-signed, then over plain HTTP; exit 0 on the first 2xx answer.
import os
import ssl
import sys
import time
import urllib.request

target = os.environ["SHOAL_HEALTHZ"]
insecure = ssl.create_default_context()
insecure.check_hostname = False
insecure.verify_mode = ssl.CERT_NONE
for _attempt in range(3):
    for scheme in ("https", "http"):
        url = f"{scheme}://{target}"
        try:
            with urllib.request.urlopen(url, timeout=5, context=insecure) as reply:
                print(f"{url}: {reply.status} {reply.read().decode(errors='replace')}")
                sys.exit(0)
        except Exception as exc:
            print(f"{url}: {exc}")
    time.sleep(2)
sys.exit(1)
