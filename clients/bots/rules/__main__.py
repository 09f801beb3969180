"""`python -m clients.bots.rules`: play one seat with `RulesBot` (MUS_REFEREE, MUS_TOKEN)."""

from clients.bots.rules_bot import main

if __name__ == "__main__":
    main()
