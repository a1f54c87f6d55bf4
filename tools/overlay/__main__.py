from overlay.cli import main

raise SystemExit(main())
