"""`python -m clients.bots.passive`: play one seat with `PassiveBot` (MUS_REFEREE, MUS_TOKEN)."""

from clients.bots.passive_bot import main

if __name__ == "__main__":
    main()
