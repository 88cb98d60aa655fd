"""The evaluation service: ``open-rag-eval serve`` (HTTP API, job runner, dashboard) and ``open-rag-eval worker``.

Jobs run the CLI's pipeline (``pipeline.arun``) on a config file the service writes per job; the database (SQLite by
default, PostgreSQL to scale out) holds jobs, their work items and events, API keys, uploads and sweeps. Needs the
``[server]`` extra; nothing here is imported by the core or by ``open-rag-eval --help``. See docs/service.md.

    app.py            the FastAPI app: lifespan, auth, body limit        routes_*.py  the endpoints
    settings.py       the server config (judge profiles, limits, ...)    dashboard.py server-rendered HTML
    intake.py         submitted job -> validated job folder + job.yaml   problems.py  problem+json errors
    db.py, storage.py tables, engine, migrations, the SQLite lock        keys.py      API keys
    jobs.py           jobs, work items, claims, events                   runner.py    runs claimed jobs
    fair.py           round-robin judge sharing across running jobs      serve.py     serve / worker entry
"""
