// RUN: flex-opt %s -split-input-file -verify-diagnostics

// flex.check: the message is a str.format template over at most 3 details.

func.func @too_many_details(%ok: i1, %x: i64) {
  // expected-error @+1 {{'flex.check' op takes at most 3 details, got 4}}
  flex.check %ok, "{0}" details(%x, %x, %x, %x)
  return
}

// -----

func.func @field_out_of_range(%ok: i1, %x: i64) {
  // expected-error @+1 {{'flex.check' op message template refers to {1} but the check has 1 detail(s)}}
  flex.check %ok, "index {0} in {1}" details(%x)
  return
}

// -----

func.func @malformed_field(%ok: i1, %x: i64) {
  // expected-error @+1 {{'flex.check' op message template has a malformed field}}
  flex.check %ok, "index {name}" details(%x)
  return
}

// -----

func.func @single_close_brace(%ok: i1) {
  // expected-error @+1 {{'flex.check' op message template has a single '}'}}
  flex.check %ok, "oops }"
  return
}

// -----

func.func @detail_not_i64(%ok: i1, %x: i32) {
  // expected-error @+1 {{operand #1 must be variadic of 64-bit signless integer}}
  "flex.check"(%ok, %x) {message = "{0}"} : (i1, i32) -> ()
  return
}
