//! Habits II: what a newcomer (coming from curl, wget, aria2c or rsync)
//! and an operator (coming from nginx) trip over, each case as they meet
//! it.

mod get;
mod json;
mod ls;
mod metalink;
mod operator;
