"""A minimal logging HTTP forward proxy: the stand-in for a site's HTTP proxy in the common scenario.

Serves plain-HTTP proxy requests (absolute URIs, as apt sends them through Acquire::http::Proxy), forwards
them directly and appends every requested URL to a log, with the user of the request's Proxy-Authorization (Basic)
if it carried one, so the tests can prove traffic went through the proxy, with the login apt was given.
Test-only: takes any login, no CONNECT (TLS) support, no caching.
"""

import base64
import binascii
import shutil
import sys
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FORWARDED_HEADERS = ("Range", "If-Modified-Since", "If-Range", "Accept", "User-Agent", "Cache-Control")
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ProxyHandler(BaseHTTPRequestHandler):
    log_path = "/var/log/forward-proxy.log"

    def _forward(self) -> None:
        with open(self.log_path, "a") as log:
            log.write(f"{self.command} {self.path}{self._login()}\n")
        headers = {k: self.headers[k] for k in FORWARDED_HEADERS if k in self.headers}
        request = urllib.request.Request(self.path, headers=headers, method=self.command)
        try:
            response = DIRECT.open(request, timeout=60)
        except urllib.error.HTTPError as error:
            response = error
        with response:
            self.send_response(response.status)
            for key, value in response.headers.items():
                if key.lower() not in ("connection", "transfer-encoding"):
                    self.send_header(key, value)
            self.end_headers()
            if self.command != "HEAD":
                shutil.copyfileobj(response, self.wfile)

    def _login(self) -> str:
        """' user=NAME' for a Basic Proxy-Authorization, '' without one (the password is never logged)."""
        scheme, _, token = self.headers.get("Proxy-Authorization", "").partition(" ")
        if scheme.lower() != "basic":
            return ""
        try:
            return " user=" + base64.b64decode(token).decode().partition(":")[0]
        except (binascii.Error, UnicodeDecodeError):
            return " user=?"

    do_GET = _forward
    do_HEAD = _forward


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), ProxyHandler).serve_forever()
