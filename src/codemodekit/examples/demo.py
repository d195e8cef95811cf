"""A tiny in-memory shop: the demo tools behind ``codemode init``.

Deterministic and offline: a fixed catalog of products, and one shopping cart per process.
Wire it up with::

    [sources.demo]
    type = "python"
    module = "codemodekit.examples.demo"
"""

from __future__ import annotations

import threading
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from codemodekit.errors import ToolError
from codemodekit.providers.python.local import define_tool

__all__ = ["add_to_cart", "get_cart", "get_product", "search_products"]

_PRODUCTS: tuple[dict[str, Any], ...] = (
    {
        "sku": "MUG-001",
        "name": "Stoneware mug",
        "category": "kitchen",
        "price_cents": 1200,
        "stock": 40,
        "tags": ["coffee", "ceramic"],
    },
    {
        "sku": "MUG-002",
        "name": "Travel mug, insulated",
        "category": "kitchen",
        "price_cents": 2400,
        "stock": 12,
        "tags": ["coffee", "steel", "travel"],
    },
    {
        "sku": "KTL-010",
        "name": "Gooseneck kettle",
        "category": "kitchen",
        "price_cents": 5900,
        "stock": 5,
        "tags": ["coffee", "tea", "steel"],
    },
    {
        "sku": "TEA-100",
        "name": "Sencha green tea, 100 g",
        "category": "pantry",
        "price_cents": 950,
        "stock": 80,
        "tags": ["tea", "organic"],
    },
    {
        "sku": "BEAN-250",
        "name": "Espresso beans, 250 g",
        "category": "pantry",
        "price_cents": 1450,
        "stock": 0,
        "tags": ["coffee", "organic"],
    },
    {
        "sku": "NB-A5",
        "name": "Dotted notebook, A5",
        "category": "stationery",
        "price_cents": 1600,
        "stock": 25,
        "tags": ["paper"],
    },
    {
        "sku": "PEN-07",
        "name": "Gel pen 0.7 mm, pack of 3",
        "category": "stationery",
        "price_cents": 650,
        "stock": 150,
        "tags": ["ink"],
    },
    {
        "sku": "LMP-D1",
        "name": "Desk lamp, dimmable",
        "category": "office",
        "price_cents": 4500,
        "stock": 8,
        "tags": ["light", "led"],
    },
)
_BY_SKU = {p["sku"]: p for p in _PRODUCTS}
_CATEGORIES = sorted({p["category"] for p in _PRODUCTS})

_cart: dict[str, int] = {}
_cart_lock = threading.Lock()  # sync tools run in worker threads

_PRODUCT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sku": {"type": "string"},
        "name": {"type": "string"},
        "category": {"type": "string", "enum": _CATEGORIES},
        "price_cents": {"type": "integer", "minimum": 0},
        "stock": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["sku", "name", "category", "price_cents", "stock", "tags"],
    "additionalProperties": False,
}

_CART_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "lines": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string"},
                    "name": {"type": "string"},
                    "quantity": {"type": "integer", "minimum": 1},
                    "line_total_cents": {"type": "integer", "minimum": 0},
                },
                "required": ["sku", "name", "quantity", "line_total_cents"],
                "additionalProperties": False,
            },
        },
        "total_cents": {"type": "integer", "minimum": 0},
    },
    "required": ["lines", "total_cents"],
    "additionalProperties": False,
}


def _search(args: dict[str, Any]) -> dict[str, Any]:
    words = [w for w in str(args.get("query", "")).lower().split() if w]
    category = args.get("category")
    max_price = args.get("max_price_cents")
    in_stock = args.get("in_stock_only", False)
    found = []
    for product in _PRODUCTS:
        text = " ".join([product["name"], product["category"], *product["tags"]]).lower()
        if words and not all(w in text for w in words):
            continue
        if category is not None and product["category"] != category:
            continue
        if max_price is not None and product["price_cents"] > max_price:
            continue
        if in_stock and product["stock"] == 0:
            continue
        found.append(dict(product, tags=list(product["tags"])))
    limit = args.get("limit", 10)
    return {"total": len(found), "items": found[:limit]}


search_products = define_tool(
    description=(
        "Search the product catalog. Every word of `query` must appear in the product's "
        "name, category or tags; filters narrow the result. Prices are in cents."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": 'Words to match, e.g. "coffee mug".'},
            "category": {"type": "string", "enum": _CATEGORIES},
            "max_price_cents": {"type": "integer", "minimum": 0},
            "in_stock_only": {"type": "boolean", "default": False},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
        },
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            "total": {"type": "integer", "description": "Matches before `limit`."},
            "items": {"type": "array", "items": _PRODUCT_SCHEMA},
        },
        "required": ["total", "items"],
        "additionalProperties": False,
    },
    annotations={"title": "Search products", "readOnlyHint": True, "openWorldHint": False},
    execute=_search,
)


def _get_product(args: dict[str, Any]) -> dict[str, Any]:
    product = _BY_SKU.get(args["sku"])
    if product is None:
        raise ToolError(f"no product with sku {args['sku']!r}; use search_products to find one")
    return dict(product, tags=list(product["tags"]))


get_product = define_tool(
    description="Get one product by its SKU (as returned by search_products).",
    input_schema={
        "type": "object",
        "properties": {"sku": {"type": "string", "description": 'e.g. "MUG-001"'}},
        "required": ["sku"],
        "additionalProperties": False,
    },
    output_schema=_PRODUCT_SCHEMA,
    annotations={"title": "Get product", "readOnlyHint": True, "openWorldHint": False},
    execute=_get_product,
)


def _cart_view() -> dict[str, Any]:
    lines = [
        {
            "sku": sku,
            "name": _BY_SKU[sku]["name"],
            "quantity": quantity,
            "line_total_cents": quantity * _BY_SKU[sku]["price_cents"],
        }
        for sku, quantity in sorted(_cart.items())
    ]
    return {"lines": lines, "total_cents": sum(line["line_total_cents"] for line in lines)}


class AddToCart(BaseModel):
    """Arguments of add_to_cart."""

    model_config = ConfigDict(extra="forbid")

    sku: str = Field(description="SKU of the product to add.")
    quantity: int = Field(1, ge=1, le=20, description="How many to add (1-20).")


def _add_to_cart(args: AddToCart) -> dict[str, Any]:
    product = _BY_SKU.get(args.sku)
    if product is None:
        raise ToolError(f"no product with sku {args.sku!r}")
    with _cart_lock:
        wanted = _cart.get(args.sku, 0) + args.quantity
        if wanted > product["stock"]:
            raise ToolError(
                f"only {product['stock']} of {args.sku} in stock "
                f"({_cart.get(args.sku, 0)} already in the cart)"
            )
        _cart[args.sku] = wanted
        return _cart_view()


add_to_cart = define_tool(
    description="Add a product to the shopping cart; returns the whole cart. Fails when the "
    "cart would hold more than the stock.",
    input_model=AddToCart,
    output_schema=_CART_SCHEMA,
    annotations={"title": "Add to cart", "readOnlyHint": False, "idempotentHint": False},
    execute=_add_to_cart,
)


def _get_cart(args: dict[str, Any]) -> dict[str, Any]:
    with _cart_lock:
        return _cart_view()


get_cart = define_tool(
    description="Show the shopping cart: lines with quantities and totals, in cents.",
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
    output_schema=_CART_SCHEMA,
    annotations={"title": "Get cart", "readOnlyHint": True, "openWorldHint": False},
    execute=_get_cart,
)
