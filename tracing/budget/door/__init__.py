"""Admission at the door, in budget terms: the book of requests admitted by predicted finish
(``book``: ``FinishAdmission``, its ``Ticket`` per request) and the figures a server's processes
share so that each admits against the load of all (``peers``)."""
