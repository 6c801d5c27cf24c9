"""Media plane: ingest (tracks -> aligned 80 ms units) and egress (engine audio -> paced track)."""
