package ledger

// CustomersPageQueryForTest is the statement CustomersPage reads a page
// with.
const CustomersPageQueryForTest = customersPageQuery
