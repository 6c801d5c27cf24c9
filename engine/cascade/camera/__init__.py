"""The cascade's camera: what the offline look makes of a frame (faces, colours, text read,
what changed), when it looks (ahead of the turn's end), the frames for a model that sees, and
how a turn's answer is told about them."""
