"""The one error type of the tournament package.

It subclasses `ValueError` because every failure here is bad input (a schedule that cannot be balanced, results
that contradict each other); the CLI edge turns it into a message and exit code 1.
"""

from __future__ import annotations


class TournamentError(ValueError):
    """Invalid input to the tournament logic: entrants, schedule parameters or match results."""
