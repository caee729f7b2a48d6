package ledger

// CustomersPageQueryForTest is the statement CustomersPage reads a page
// with.
const CustomersPageQueryForTest = customersPageQuery

// KeysPageQueryForTest is the statement KeysPage reads a page with.
const KeysPageQueryForTest = keysPageQuery
