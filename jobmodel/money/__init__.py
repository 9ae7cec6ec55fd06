"""Money: training prices, what a job costs and may cost, and the teams' limits on it.

Holds: ``pricing`` (the price table from ``prices.json``, the Price List refresh and
``ftl:prices``; estimates and costs), ``price_list`` (reading the AWS Price List API's
answers), ``limits`` (each team's usage and the checks and DynamoDB updates that keep it
within its limits) and the shipped ``prices.json``.

May import (within jobmodel): contract, teams.
"""
