"""``openprogram view`` as an ASGI app, to mount in a server of your own (``openprogram[view]``).

``openprogram view`` serves this same app on a local port; here you choose the server, the
token and the ``Host`` names it answers to::

    from openprogram.view import Viewer, create_app

    app = create_app(Viewer("sqlite:///agent.db"), token=secret, hosts={"localhost:8000"})

A browser opens ``/?token=<secret>`` once and gets the cookie named ``cookie`` (default
:data:`COOKIE`); every other request needs it. The viewer reads the database read-only unless
``Viewer(..., allow_write=True)`` (rolling a layer back writes).
"""

from openprogram._view import Viewer
from openprogram._view._app import COOKIE, create_app

__all__ = ["COOKIE", "Viewer", "create_app"]
