"""The budget's terms: the policy and its presets, models' windows, token counting, redaction,
the history tools' names and cutting text.
"""
