"""Calibrating the judge against people: agreement statistics (pure), label files, and the injection probe."""
