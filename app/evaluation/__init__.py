"""Measuring the answers ragtime gives (``ragtime eval answers``): a labelled question set
(``dataset``), the rules that score one answer (``scoring``), the client that asks a running
server (``client``) and the tables the scores make (``report``)."""
