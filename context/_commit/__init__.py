"""The commit: the only writer of what a render or an operation decided."""
