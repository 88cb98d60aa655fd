import sys

from open_rag_eval.cli import main

sys.exit(main())
