"""The database of Mus Arena: bots and their versions, leagues, matches, results, replays.

The database, not the broker, is the source of truth: a league is expanded into match rows up front, so
progress, resume and standings are queries. `session` opens it (SQLite in WAL mode by default, PostgreSQL with
`MUS_DATABASE_URL`) and migrates it; `repo` holds the functions the CLI and the Celery tasks call.
"""
