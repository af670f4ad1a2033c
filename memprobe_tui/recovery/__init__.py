"""Protocol A's screens and widgets: the users × systems overview, the transcript stepper, the dimension
inspector, the grid, plots, compare and the command palette."""
