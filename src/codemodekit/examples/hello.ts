// hello.ts: a first code-mode script over the demo shop (see codemode.toml).
// Run it with `codemode run hello.ts`. Tool results are { content, structuredContent }.

const found = await tools.demo.search_products({ query: "coffee", in_stock_only: true });
const products = found.structuredContent?.items ?? [];
console.log(`${products.length} coffee products in stock`);

// Pick the cheapest one and put two in the cart.
const cheapest = products.reduce((best, p) => (p.price_cents < best.price_cents ? p : best));
const cart = await tools.demo.add_to_cart({ sku: cheapest.sku, quantity: 2 });

const summary = {
  cheapest: cheapest.name,
  cart_total: (cart.structuredContent!.total_cents / 100).toFixed(2),
};
// A script is the body of an async function, so it ends with `return`. Editors flag a
// `return` outside a function (TS1108) whatever the tsconfig, and never check what it
// returns: build the value above, where it is checked, and silence that one line.
// @ts-ignore TS1108
return summary;
