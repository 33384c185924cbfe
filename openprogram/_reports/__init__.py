"""Reports: the prompt breakdowns, the views and tables the CLI and the viewer print, plots."""
