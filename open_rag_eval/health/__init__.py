"""Judge health: what kind of reply each judgment rests on, counted per task, checked against thresholds."""
