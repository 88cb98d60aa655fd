"""Where results and state live on disk, and how every failure there becomes one clear error (``StorageError``).

- ``generation``: the one output writer. A run writes a complete set of result files into a fresh folder beside
  the output folder and swaps it in at the end; a failure leaves the previous complete set untouched.
- ``lock``: one run per output folder at a time (``.<folder>.lock`` beside it, naming the owner's pid).
- ``sqlite``: opening the judge cache and the sweep history, with every SQLite failure explained in one line.
- ``journal``: a connector run's fetched outputs, saved as they arrive so a rerun after a kill reuses them.
- ``checks``: what ``validate`` reports about those paths, without creating anything.
"""
