"""The image's HEALTHCHECK: GET /healthz from this container's own server, exit 0 on a 200.

The request names a host the server accepts (the first of ALLOWED_HOSTS), as a client's would:
with DEBUG off Django answers 400 to any other Host, 127.0.0.1 included unless it is listed.
"""

import os
import sys
import urllib.request


def accepted_host(allowed_hosts: str) -> str:
    for entry in (item.strip() for item in allowed_hosts.split(",")):
        if entry and entry != "*":
            return entry.lstrip(".")  # ".example.com" accepts example.com and its subdomains
    return "localhost"


def main() -> int:
    port = os.environ.get("PORT", "8000")
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/healthz",
        headers={"Host": accepted_host(os.environ.get("ALLOWED_HOSTS", ""))},
    )
    try:
        with urllib.request.urlopen(request, timeout=4) as response:
            return 0 if response.status == 200 else 1
    except OSError as exc:  # refused, timed out, or an HTTP error status
        print(f"healthcheck: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
