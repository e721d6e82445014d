"""``python -m devstack``: the embedded stack (see ``devstack.stack``)."""

from devstack.stack import main

if __name__ == "__main__":
    main()
