from shared.localstack.cli import main

raise SystemExit(main())
