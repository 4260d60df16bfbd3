from ._node import main

raise SystemExit(main())
