"""The smallest WSGI app: gunicorn's own ceiling on this machine, with no Django in it."""

BODY = b"ok"
HEADERS = [("Content-Type", "text/plain"), ("Content-Length", str(len(BODY)))]


def app(environ, start_response):
    start_response("200 OK", HEADERS)
    return [BODY]
