from eviscene_tui.cli import main

raise SystemExit(main())
