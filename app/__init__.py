"""omnicall server: signaling, sessions, static page."""
