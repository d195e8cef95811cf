// hello.ts: a first code-mode script over the demo shop (see codemode.toml).
// Run it with `codemode run hello.ts`. Tool results are { content, structuredContent }.

const found = await tools.demo.search_products({ query: "coffee", in_stock_only: true });
const products = found.structuredContent?.items ?? [];
console.log(`${products.length} coffee products in stock`);

// Pick the cheapest one and put two in the cart.
const cheapest = products.reduce((best, p) => (p.price_cents < best.price_cents ? p : best));
const cart = await tools.demo.add_to_cart({ sku: cheapest.sku, quantity: 2 });

return {
  cheapest: cheapest.name,
  cart_total: (cart.structuredContent!.total_cents / 100).toFixed(2),
};
