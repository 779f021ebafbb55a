from cortexctl.cli.app import main

raise SystemExit(main())
