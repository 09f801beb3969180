"""Alembic migrations of the Mus Arena schema, run by `workers.db.session.ensure_schema` (no alembic.ini).

A package so that it ships with `workers.db`; Alembic itself loads `env.py` and `versions/*.py` by path.
"""
