from cvfs.cli import main

raise SystemExit(main())
