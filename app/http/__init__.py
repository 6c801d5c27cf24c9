"""The WebRTC front end's HTTP side: the application and its routes (``POST /offer``),
offer bodies, the offer rate limiter and ICE candidates."""
