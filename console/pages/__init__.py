"""The console's pages, one module per part of the site, as jobctl has one module per
command group. Each page is a function of the ``Site`` (``console.site``), the request and,
behind the guard, the session; each module's ``routes(site)`` lists its URLs, and
``console.app`` puts the lists together."""
