from zcoder.cli import main

raise SystemExit(main())
