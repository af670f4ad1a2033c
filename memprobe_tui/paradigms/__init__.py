"""Protocol B's screens and widgets: the episode list, the session stepper, the probe inspector, plots and
the command palette."""
