"""One module per screen of the replay UI."""
