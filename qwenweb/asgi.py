import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "qwenweb.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from chat.routing import websocket_urlpatterns  # noqa: E402
from monitor.routing import websocket_urlpatterns as monitor_websocket_urlpatterns  # noqa: E402
from qwenweb.api_handler import ApiHandler, ByPath  # noqa: E402
from qwenweb.body_limit import RequestBodyLimit  # noqa: E402
from qwenweb.origin import SameOriginValidator  # noqa: E402
from qwenweb.socket_language import SocketLanguage  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": RequestBodyLimit(ByPath(ApiHandler(), django_asgi_app)),
        "websocket": SameOriginValidator(
            AuthMiddlewareStack(SocketLanguage(URLRouter(websocket_urlpatterns + monitor_websocket_urlpatterns)))
        ),
    }
)
