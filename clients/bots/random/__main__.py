"""`python -m clients.bots.random`: play one seat with `RandomBot` (MUS_REFEREE, MUS_TOKEN)."""

from clients.bots.random_bot import main

if __name__ == "__main__":
    main()
