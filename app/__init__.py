"""The servers: the WebRTC front end (``omnicall serve``) and the Realtime server
(``omnicall serve-engine``), in rooms - ``call/``, ``http/``, ``realtime/``, ``turns/``,
``process/``, ``storage/`` - over the modules they share here (config, app state, set-up,
access, status routes, metrics); ``cli`` is the ``omnicall`` command."""
