"""The price refresh (issue 18, point 12): Price List entries -> training prices -> the ledger
item, and the trigger's table with them (the shipped file < the Price List < ftl:prices)."""

from __future__ import annotations

import importlib.util
import json
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from jobmodel.money.price_list import get_products_request, price_item_key, training_prices
from jobmodel.money.pricing import PriceTable
from sandbox.pricing import PricingStandIn, product

ROOT = Path(__file__).resolve().parents[3]


def _handler_module():
    spec = importlib.util.spec_from_file_location(
        "ftl_prices_handler", ROOT / "lambda" / "prices" / "handler.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _client(service: str):
    return boto3.client(
        service, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )


# ------------------------------------------------------------------------ parsing
def test_only_training_instance_hours_of_the_region_are_kept():
    entries = [
        product("us-east-1", "USE1-Train:ml.g5.xlarge", 1.5),
        product("us-east-1", "USE1-Host:ml.g5.xlarge", 1.9),  # hosting
        product("us-east-1", "USE1-Train-Spot:ml.g5.xlarge", 0.5),  # not the Train usage type
        product("us-west-2", "USW2-Train:ml.g5.2xlarge", 2.5),  # another region
        product("us-east-1", "USE1-Train:ml.p5.48xlarge", 0.0),  # no positive price
        product("us-east-1", "USE1-Train:ml.m5.large", 0.1, unit="Quantity"),  # not per hour
    ]
    texts = [json.dumps(e) for e in entries]  # PriceList is a list of JSON strings
    assert training_prices(texts, "us-east-1") == {"ml.g5.xlarge": 1.5}


def test_a_product_with_two_different_hourly_prices_is_skipped_not_guessed():
    entry = product("us-east-1", "USE1-Train:ml.g5.xlarge", 1.5)
    (offer,) = entry["terms"]["OnDemand"].values()
    (dim,) = offer["priceDimensions"].values()
    offer["priceDimensions"]["second"] = {**dim, "pricePerUnit": {"USD": "2.0"}}
    assert training_prices([json.dumps(entry)], "us-east-1") == {}


def test_the_request_is_valid_for_botocores_model_on_every_page():
    stubber = Stubber(_client("pricing"))  # the stub validates parameters against the model
    stubber.add_response("get_products", {"PriceList": []}, get_products_request("us-east-1"))
    stubber.add_response("get_products", {"PriceList": []}, get_products_request("us-east-1", "t"))
    with stubber:
        stubber.client.get_products(**get_products_request("us-east-1"))
        stubber.client.get_products(**get_products_request("us-east-1", "t"))
    stubber.assert_no_pending_responses()


# ------------------------------------------------------------------------ refresh
def test_refresh_pages_through_the_answer_and_records_date_and_source():
    standin = PricingStandIn(
        [product("us-east-1", f"USE1-Train:ml.g5.{n}xlarge", float(n)) for n in (2, 4, 8)]
        + [product("us-east-1", "USE1-Train:ml.g5.xlarge", 1.5)]
    )
    pricing = _client("pricing")
    # the stand-in answers in the API's shape, two products a page
    pages = []
    token = None
    while True:
        request = {**get_products_request("us-east-1", token), "MaxResults": 2}
        pages.append((request, standin.get_products(request)))
        token = pages[-1][1].get("NextToken")
        if not token:
            break
    assert len(pages) == 2 and all(isinstance(t, str) for t in pages[0][1]["PriceList"])
    dynamodb = _client("dynamodb")
    with Stubber(pricing) as sp, Stubber(dynamodb) as sd:
        for request, answer in pages:
            sp.add_response("get_products", answer, {**request, "MaxResults": 100})
        expected_item = {
            "pk": {"S": price_item_key("us-east-1")},
            "prices": {
                "S": '{"ml.g5.2xlarge":2.0,"ml.g5.4xlarge":4.0,"ml.g5.8xlarge":8.0,'
                '"ml.g5.xlarge":1.5}'
            },
            "source": {"S": _source()},
            "refreshed_at": {"S": "2026-11-24T10:00:00Z"},
        }
        sd.add_response("put_item", {}, {"TableName": "ledger", "Item": expected_item})
        done = _handler_module().refresh(
            pricing, dynamodb, "ledger", "us-east-1", lambda: datetime(2026, 11, 24, 10, tzinfo=UTC)
        )
    assert done == {"written": True, "products": 4, "prices": 4}


def _source() -> str:
    from jobmodel.money.price_list import source_text

    return source_text("us-east-1")


def test_no_price_in_the_answer_writes_nothing():
    with Stubber(_client("pricing")) as sp:
        empty = {"PriceList": [], "FormatVersion": "aws_v1"}
        sp.add_response("get_products", empty, get_products_request("us-east-1"))
        done = _handler_module().refresh(sp.client, None, "ledger", "us-east-1", datetime.now)
    assert done == {"written": False, "products": 0, "prices": 0}


# ------------------------------------------------------------------------ the table
def test_listed_prices_beat_the_shipped_file_and_the_override_beats_both(tmp_path):
    shipped = tmp_path / "prices.json"
    regions = {"us-east-1": {"ml.g5.xlarge": 9.0}}
    shipped.write_text(json.dumps({"date": "2026-01-01", "source": "file", "regions": regions}))
    override = json.dumps({"us-east-1": {"ml.g5.2xlarge": 3.0}})
    table = PriceTable.load(override, path=shipped).with_listed(
        "us-east-1",
        {"ml.g5.xlarge": 1.5, "ml.g5.2xlarge": 2.0},
        source="price list",
        date="2026-11-24T10:00:00Z",
    )
    assert table.hourly("us-east-1", "ml.g5.xlarge") == (1.5, None)
    assert table.hourly("us-east-1", "ml.g5.2xlarge") == (3.0, None)  # ftl:prices stays
    assert (table.source, table.date) == ("price list", "2026-11-24T10:00:00Z")
    price, reason = table.hourly("us-east-1", "ml.p5.48xlarge")
    assert price is None and "Price List" in reason


def test_a_bad_listed_price_is_refused_naming_it():
    with pytest.raises(ValueError, match="price list.us-east-1.ml.g5.xlarge"):
        PriceTable().with_listed("us-east-1", {"ml.g5.xlarge": -1}, source="s", date="d")
