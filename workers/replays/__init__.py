"""Replays of finished matches for people: a self-contained HTML page built from the engine's replay record."""
