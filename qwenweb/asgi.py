import os

from django.core.asgi import get_asgi_application

from qwenweb import patches

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "qwenweb.settings")
django_asgi_app = get_asgi_application()
# The web process's patches into Daphne, Twisted and Django (qwenweb/patches/),
# checked against the installed versions: a mismatch refuses to start, naming the library.
patches.install("web")

from django.core.handlers.asgi import ASGIHandler  # noqa: E402
from django.core.signals import request_finished  # noqa: E402
from django.db import connections  # noqa: E402


def close_request_connections(sender, **_kwargs) -> None:
    """A page request's sync work runs in a thread of its own (Django's ThreadSensitiveContext), which
    ends with it: its database connection is closed, not kept (DB_CONN_MAX_AGE keeps those of the one
    database thread the chat sockets and the API share, the workers' and the sampler's). Only for the
    pages' handler: the API's runs in that shared thread, and Django's test client keeps its
    connection for the test's transaction."""
    if sender is ASGIHandler:
        connections.close_all()


request_finished.connect(close_request_connections)

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from chat.routing import websocket_urlpatterns  # noqa: E402
from monitor.routing import websocket_urlpatterns as monitor_websocket_urlpatterns  # noqa: E402
from qwenweb.access_log import AccessLog  # noqa: E402
from qwenweb.api_middleware import ByPath  # noqa: E402
from qwenweb.body_limit import RequestBodyLimit  # noqa: E402
from qwenweb.origin import SameOriginValidator  # noqa: E402
from qwenweb.patches.api_handler import ApiHandler  # noqa: E402
from qwenweb.socket_language import SocketLanguage  # noqa: E402

application = AccessLog(
    ProtocolTypeRouter(
        {
            "http": RequestBodyLimit(ByPath(ApiHandler(), django_asgi_app)),
            "websocket": SameOriginValidator(
                AuthMiddlewareStack(SocketLanguage(URLRouter(websocket_urlpatterns + monitor_websocket_urlpatterns)))
            ),
        }
    )
)
